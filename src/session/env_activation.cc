// OPSIGHT_OUTPUT=path in the environment records the whole run of any program linked
// with the opsight shared library, with no code change: a session starts when the library
// loads and the file is written when the program exits (the Furiosa profiler's env
// activation). OPSIGHT_BUFFER_MB bounds the memory it may use; OPSIGHT_SAMPLE_MS=N samples
// process and GPU counters every N ms (docs/metrics.md); OPSIGHT_CUDA=1 traces CUDA
// kernels, copies and API calls through CUPTI (docs/gpu.md).
//
// Child processes inherit the variable. So that a traced child never overwrites its
// parent's file, "%p" in the path becomes the process id, and a process that finds
// OPSIGHT_OUTPUT_OWNER set to another process's id (its traced ancestor) writes
// "<stem>.<pid><extension>" instead of the path itself.
//
// `opsight ctl PID off|on` switches such a program's recording: a control watcher thread
// (session/control.hpp) pauses and resumes the session, so that a switched-off span costs
// one relaxed load of the recording flag.
//
// This file is compiled into the shared library only: the opsight CLI, which starts
// traced programs with OPSIGHT_OUTPUT set, must not trace itself.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "opsight/opsight.hpp"
#include "session/control.hpp"

namespace opsight {
namespace {

Session* g_environment_session = nullptr;

void stop_environment_session() {
  if (g_environment_session == nullptr) return;
  session::stop_control_watcher();  // before the session: it pauses and resumes it
  Session* session = g_environment_session;
  g_environment_session = nullptr;
  if (!session->stop())
    std::fprintf(stderr, "opsight: %s\n", session->error().c_str());
  else if (session->events_dropped() > 0)
    std::fprintf(stderr, "opsight: %llu events dropped (raise OPSIGHT_BUFFER_MB)\n",
                 static_cast<unsigned long long>(session->events_dropped()));
  delete session;
}

// The file this process writes for OPSIGHT_OUTPUT (see the top of the file).
std::string output_path_for_this_process(std::string path) {
  const std::string pid = std::to_string(getpid());
  bool has_pid_pattern = false;
  for (size_t at = path.find("%p"); at != std::string::npos;
       at = path.find("%p", at + pid.size())) {
    path.replace(at, 2, pid);
    has_pid_pattern = true;
  }
  const char* owner = std::getenv("OPSIGHT_OUTPUT_OWNER");
  if (!has_pid_pattern && owner != nullptr && pid != owner) {
    size_t slash = path.find_last_of('/');
    size_t dot = path.rfind('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = path.size();
    path.insert(dot, "." + pid);
  }
  return path;
}

// The integer in environment variable `name` if it is one from `lowest` to `highest`;
// nullopt (with a warning when the variable is set) otherwise.
std::optional<unsigned long long> environment_integer(const char* name, unsigned long long lowest,
                                                      unsigned long long highest) {
  const char* text = std::getenv(name);
  if (text == nullptr) return std::nullopt;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (end != text && *end == '\0' && value >= lowest && value <= highest) return value;
  std::fprintf(stderr, "opsight: ignoring %s=%s (not an integer from %llu to %llu)\n", name, text,
               lowest, highest);
  return std::nullopt;
}

// OPSIGHT_SESSION_PID names the process whose environment session already records: another
// copy of opsight in this process (the Python package's core, when the CUDA driver loads
// libopsight.so as its injection library) leaves the recording to it.
bool another_copy_records_this_process() {
  const char* owner = std::getenv("OPSIGHT_SESSION_PID");
  return owner != nullptr && std::to_string(getpid()) == owner;
}

__attribute__((constructor)) void start_environment_session() {
  const char* output = std::getenv("OPSIGHT_OUTPUT");
  if (output == nullptr || *output == '\0') return;
  if (another_copy_records_this_process()) return;
  SessionOptions options;
  options.output = output_path_for_this_process(output);
  if (std::getenv("OPSIGHT_OUTPUT_OWNER") == nullptr)
    setenv("OPSIGHT_OUTPUT_OWNER", std::to_string(getpid()).c_str(), 1);
  if (auto megabytes = environment_integer("OPSIGHT_BUFFER_MB", 1, 1ull << 20))
    options.buffer_bytes = static_cast<size_t>(*megabytes) << 20;
  if (auto sample_ms = environment_integer("OPSIGHT_SAMPLE_MS", 0, 3'600'000))
    options.sample_interval_ms = static_cast<uint32_t>(*sample_ms);
  if (auto cuda = environment_integer("OPSIGHT_CUDA", 0, 1)) options.cuda = *cuda == 1;
  // OPSIGHT_PRESET=production (docs/production.md): counters once a second and the flight
  // recorder keeping the last 60 s, unless their own variables say otherwise.
  if (const char* preset = std::getenv("OPSIGHT_PRESET");
      preset != nullptr && std::string_view(preset) == "production") {
    if (std::getenv("OPSIGHT_SAMPLE_MS") == nullptr) options.sample_interval_ms = 1000;
    if (std::getenv("OPSIGHT_RING") == nullptr) options.ring = "60s";
  }
  // The flight recorder (docs/production.md), as `opsight run --ring` asks it.
  if (const char* ring = std::getenv("OPSIGHT_RING"); ring != nullptr && *ring != '\0') {
    options.ring = ring;
    if (const char* directory = std::getenv("OPSIGHT_DUMP_DIR"); directory && *directory)
      options.dump_prefix = std::string(directory) + "/" + std::to_string(getpid());
    if (const char* slow = std::getenv("OPSIGHT_DUMP_ON_SLOW")) options.dump_on_slow = slow;
    if (const char* exception = std::getenv("OPSIGHT_DUMP_ON_EXCEPTION"))
      options.dump_on_exception = std::string_view(exception) != "0";
  }
  auto* session = new Session(options);
  if (!session->ok()) {
    std::fprintf(stderr, "opsight: OPSIGHT_OUTPUT: %s\n", session->error().c_str());
    delete session;
    return;
  }
  if (options.cuda && !session->gpu_status().empty())
    std::fprintf(stderr, "opsight: %s\n", session->gpu_status().c_str());
  g_environment_session = session;
  setenv("OPSIGHT_SESSION_PID", std::to_string(getpid()).c_str(), 1);
  std::atexit(stop_environment_session);
  // Called on the watcher's thread; the session outlives the watcher (see above).
  session::start_control_watcher(
      [](bool enabled) {
        if (enabled)
          g_environment_session->resume();
        else
          g_environment_session->pause();
      },
      /*enabled=*/true);
}

}  // namespace
}  // namespace opsight

// CUDA's injection entry point: with CUDA_INJECTION64_PATH naming libopsight.so (what
// `opsight run` sets for a program that is not Python), the CUDA driver loads the library
// in cuInit, whose constructor starts the OPSIGHT_OUTPUT session, and then calls this: GPU
// tracing starts before the program's first kernel (unless OPSIGHT_CUDA=0), in any CUDA
// program, linked with opsight or not. Returns 1 (success) whatever happens: the program
// must run on.
extern "C" OPSIGHT_API int InitializeInjection() {
  opsight::Session* session = opsight::g_environment_session;
  const char* cuda = std::getenv("OPSIGHT_CUDA");
  if (session == nullptr || (cuda != nullptr && std::string(cuda) == "0")) return 1;
  const std::string& status = session->start_gpu_tracing();
  if (!status.empty()) std::fprintf(stderr, "opsight: %s\n", status.c_str());
  return 1;
}
