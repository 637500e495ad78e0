// opsight::Session: a recording session with an output. Native output streams straight to
// the file; Chrome JSON and Perfetto (.pftrace) output stream to "<output>.opsight.tmp" (so
// a crash still leaves a readable recording) and are converted when the session stops.
#include <unistd.h>

#include <cstdio>

#include "collect/metric_costs.hpp"
#include "collect/sampler.hpp"
#include "io/io.hpp"
#include "opsight/opsight.hpp"
#include "record/recorder.hpp"

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
};

Session::Session(SessionOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  const std::string& output = state_->options.output;
  if (!output.empty()) {
    auto format = io::format_from_path(output);
    if (!format) {
      state_->error = output + ": unknown output format (use .opsight, .json or .pftrace)";
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
  // The file is opened (and truncated) only once the recorder has accepted the session.
  auto open_sink = [this](std::string* error) -> std::unique_ptr<record::ByteSink> {
    if (state_->stream_path.empty()) return std::make_unique<record::MemorySink>();
    return record::open_file_sink(state_->stream_path, error);
  };
  if (auto problem = record::start_recording(open_sink, recording)) {
    state_->error = *problem;
    return;
  }
  collect::reset_metric_costs();
  state_->running = true;
  state_->owner_pid = getpid();
  if (state_->options.sample_interval_ms > 0)
    state_->sampler = std::make_unique<collect::Sampler>(
        collect::SamplerOptions{std::chrono::milliseconds(state_->options.sample_interval_ms)});
}

Session::~Session() { stop(); }

void Session::pause() {
  if (state_->running) record::pause_recording();
}

void Session::resume() {
  if (state_->running) record::resume_recording();
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
  record::StopResult result = record::stop_recording();
  state_->events_dropped = result.events_dropped;
  if (result.error) state_->error = *result.error;
  if (state_->options.output.empty()) {
    if (auto* memory = dynamic_cast<record::MemorySink*>(result.sink.get()))
      state_->native_bytes = std::move(memory->bytes());
    return ok();
  }
  result.sink.reset();  // closes the file
  if (state_->output_format != io::FileFormat::kNative && state_->error.empty()) {
    io::ReadResult recording = io::read_trace_file(state_->stream_path);
    if (!recording.ok()) {
      state_->error = recording.error->to_string(state_->stream_path);
      return false;
    }
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

}  // namespace opsight
