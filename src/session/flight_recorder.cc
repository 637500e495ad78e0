#include "session/flight_recorder.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "io/native/native_tail.hpp"
#include "record/recorder.hpp"

namespace opsight::session {

namespace {

using record::monotonic_ns;

int64_t unix_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

std::string milliseconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f ms", static_cast<double>(ns) / 1e6);
  return text;
}

// Set by the SIGUSR2 handler, taken by the recorder's thread.
std::atomic<bool> g_dump_signal{false};
struct sigaction g_previous_action {};

void on_dump_signal(int) { g_dump_signal.store(true); }

}  // namespace

std::optional<std::vector<SlowSpanRule>> parse_slow_span_rules(std::string_view text,
                                                               std::string* error) {
  std::vector<SlowSpanRule> rules;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view rule = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    while (!rule.empty() && rule.front() == ' ') rule.remove_prefix(1);
    while (!rule.empty() && rule.back() == ' ') rule.remove_suffix(1);
    auto fail = [&](const std::string& problem) {
      *error = "dump-on-slow rule '" + std::string(rule) + "': " + problem +
               " (expected NAME>DURATION, like handle_request>200ms)";
      return std::nullopt;
    };
    size_t mark = rule.rfind('>');
    if (mark == std::string_view::npos || mark == 0) return fail("no NAME>");
    std::string_view duration = rule.substr(mark + 1);
    double value = 0;
    auto parsed = std::from_chars(duration.data(), duration.data() + duration.size(), value);
    std::string_view unit(parsed.ptr,
                          static_cast<size_t>(duration.data() + duration.size() - parsed.ptr));
    double scale = unit == "ns"   ? 1
                   : unit == "us" ? 1e3
                   : unit == "ms" ? 1e6
                   : unit == "s"  ? 1e9
                                  : 0;
    if (parsed.ec != std::errc() || !(value >= 0)) return fail("no duration after '>'");
    if (scale == 0) return fail("the duration has no unit (ns, us, ms, s)");
    SlowSpanRule parsed_rule;
    parsed_rule.name = std::string(rule.substr(0, mark));
    while (!parsed_rule.name.empty() && parsed_rule.name.back() == ' ') parsed_rule.name.pop_back();
    parsed_rule.threshold_ns = static_cast<int64_t>(value * scale);
    rules.push_back(std::move(parsed_rule));
  }
  return rules;
}

// Watches the events as the stream writer hands them to the ring, for the automatic
// triggers: it decodes them with the live tail, which keeps only the spans open now.
struct FlightRecorder::Watch {
  io::NativeTail tail{"<flight recorder ring>"};
  io::TailVisitor visitor;
};

FlightRecorder::FlightRecorder(FlightRecorderOptions options) : options_(std::move(options)) {}

FlightRecorder::~FlightRecorder() { stop(); }

std::unique_ptr<record::RingSink> FlightRecorder::make_sink() {
  auto ring = std::make_unique<record::RingSink>(options_.limits);
  ring_ = ring.get();
  if (options_.dump_on_exception || !options_.slow_rules.empty()) {
    watch_ = std::make_unique<Watch>();
    watch_->visitor.on_span = [this](const io::EndedSpan& span) {
      bool root = !span.async && (span.parent_span_id == 0 || span.remote_parent);
      if (!root || span.unfinished) return;
      if (options_.dump_on_exception)
        for (const io::TailArg& arg : *span.args)
          if (arg.key == "exception.type") {
            automatic_dump("exception " + arg.text + " in " + std::string(span.name));
            return;
          }
      for (const SlowSpanRule& rule : options_.slow_rules)
        if (span.name == rule.name && span.duration_ns > rule.threshold_ns) {
          automatic_dump("slow span: " + rule.name + " took " + milliseconds(span.duration_ns) +
                         " (rule: > " + milliseconds(rule.threshold_ns) + ")");
          return;
        }
    };
    Watch* watch = watch_.get();
    ring->set_observer([watch](std::string_view bytes) {
      // The writer's own stream: never refused; an error would only stop the watch.
      static_cast<void>(watch->tail.feed(bytes, watch->visitor));
    });
  }
  return ring;
}

void FlightRecorder::start() {
  if (!options_.dump_on_signal) return;
  struct sigaction current {};
  if (sigaction(SIGUSR2, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) {
    std::fprintf(stderr,
                 "opsight: flight recorder: SIGUSR2 is the program's own: dump with opsight ctl "
                 "%d dump instead\n",
                 static_cast<int>(getpid()));
    return;
  }
  struct sigaction action {};
  action.sa_handler = on_dump_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  g_dump_signal.store(false);
  if (sigaction(SIGUSR2, &action, &g_previous_action) != 0) return;
  signal_installed_ = true;
  signal_thread_ = std::thread([this] { signal_loop(); });
}

void FlightRecorder::signal_loop() {
  pthread_setname_np(pthread_self(), "opsight-ring");
  std::unique_lock lock(loop_mutex_);
  while (!loop_wake_.wait_for(lock, std::chrono::milliseconds(50),
                              [this] { return loop_stopping_; })) {
    if (!g_dump_signal.exchange(false)) continue;
    lock.unlock();
    DumpResult result = dump("SIGUSR2");
    if (!result.error.empty())
      std::fprintf(stderr, "opsight: flight recorder: %s\n", result.error.c_str());
    lock.lock();
  }
}

void FlightRecorder::stop() {
  if (signal_installed_) {
    sigaction(SIGUSR2, &g_previous_action, nullptr);
    signal_installed_ = false;
  }
  if (signal_thread_.joinable()) {
    {
      std::lock_guard lock(loop_mutex_);
      loop_stopping_ = true;
    }
    loop_wake_.notify_one();
    signal_thread_.join();
  }
  std::lock_guard lock(dump_mutex_);
  stopped_.store(true);
}

DumpResult FlightRecorder::dump(std::string_view trigger) { return write_dump(trigger, true); }

void FlightRecorder::automatic_dump(std::string trigger) {
  int64_t now = monotonic_ns();
  int64_t quiet = options_.limits.max_age_ns > 0 ? options_.limits.max_age_ns : 10'000'000'000;
  {
    std::lock_guard lock(dump_mutex_);
    if ((last_automatic_dump_ns_ != 0 && now - last_automatic_dump_ns_ < quiet) ||
        automatic_dumps_ >= options_.max_automatic_dumps) {
      triggers_absorbed_.fetch_add(1);
      return;
    }
    last_automatic_dump_ns_ = now;
    ++automatic_dumps_;
  }
  // On the writer's thread, inside its drain: the ring already holds the round with the
  // span, and a flush here would wait for the drain it is in.
  DumpResult result = write_dump(trigger, false);
  if (!result.error.empty())
    std::fprintf(stderr, "opsight: flight recorder: %s\n", result.error.c_str());
}

DumpResult FlightRecorder::write_dump(std::string_view trigger, bool flush) {
  DumpResult result;
  if (ring_ == nullptr || stopped_.load()) {
    result.error = "no flight recorder is running in this process";
    return result;
  }
  // Before the dump lock: the writer's thread may be waiting for it inside a drain.
  if (flush) record::flush_recording();
  std::lock_guard lock(dump_mutex_);
  if (stopped_.load()) {
    result.error = "the session ended before the dump";
    return result;
  }
  uint64_t index = dumps_written_.load() + 1;
  uint64_t absorbed = triggers_absorbed_.load();
  std::string bytes =
      ring_->snapshot({{"dump_trigger", std::string(trigger)},
                       {"dump_index", std::to_string(index)},
                       {"dump_unix_ns", std::to_string(unix_ns())},
                       {"dump_triggers_absorbed", std::to_string(absorbed - absorbed_reported_)}});
  std::string path = options_.dump_prefix + ".dump-" + std::to_string(index) + ".opsight";
  std::error_code ignored;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      result.error = temporary + ": cannot write the dump";
      return result;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    result.error = path + ": cannot write the dump";
    return result;
  }
  absorbed_reported_ = absorbed;
  dumps_written_.store(index);
  record::RingStats stats = ring_->stats();
  std::fprintf(stderr,
               "opsight: flight recorder: dumped %.1f s of recording to %s (trigger: %.*s; "
               "%llu older events dropped from the ring)\n",
               stats.oldest_round_ns > 0
                   ? static_cast<double>(monotonic_ns() - stats.oldest_round_ns) / 1e9
                   : 0.0,
               path.c_str(), static_cast<int>(trigger.size()), trigger.data(),
               static_cast<unsigned long long>(stats.events_dropped));
  result.path = path;
  return result;
}

std::string FlightRecorder::final_snapshot() {
  if (ring_ == nullptr) return {};
  std::lock_guard lock(dump_mutex_);
  return ring_->snapshot(
      {{"dump_trigger", "session end"},
       {"dump_triggers_absorbed", std::to_string(triggers_absorbed_.load() - absorbed_reported_)},
       {"dumps_written", std::to_string(dumps_written_.load())}});
}

}  // namespace opsight::session
