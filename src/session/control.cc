// The control files of `opsight ctl` (see control.hpp): the private directory, the files
// written and read through its descriptor, the watcher thread of a traced process, and the
// CLI's side.
#include "session/control.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

namespace opsight::session {
namespace {

std::string error_text(int error_number) { return std::strerror(error_number); }

std::string octal_mode(mode_t mode) {
  char text[16];
  std::snprintf(text, sizeof(text), "0%03o", static_cast<unsigned>(mode & 07777));
  return text;
}

// $XDG_RUNTIME_DIR when it is set, absolute and private; nullopt otherwise.
std::optional<std::string> private_runtime_directory() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime == nullptr || runtime[0] != '/') return std::nullopt;
  struct stat status;
  if (lstat(runtime, &status) != 0) return std::nullopt;
  if (private_directory_problem(status.st_mode, status.st_uid, geteuid())) return std::nullopt;
  return std::string(runtime);
}

std::string join(const std::string& directory, const std::string& name) {
  if (!directory.empty() && directory.back() == '/') return directory + name;
  return directory + "/" + name;
}

// mkdir -p with mode 0700 for every directory it makes.
void make_directories(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1))
    mkdir(path.substr(0, slash).c_str(), 0700);
  mkdir(path.c_str(), 0700);
}

bool write_all(int descriptor, std::string_view text) {
  while (!text.empty()) {
    ssize_t written = ::write(descriptor, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
  return true;
}

std::string_view trimmed(std::string_view text) {
  const char* blanks = " \t\r\n";
  size_t first = text.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
}

// The first control directory holding a state file for `pid`, or nullptr; `problem` gets
// the first refusal on the way, `first_path` the state file's path in the first directory.
std::unique_ptr<ControlDirectory> find_process_directory(pid_t pid, std::string* problem,
                                                         std::string* first_path) {
  const std::string name = state_file_name(pid);
  for (const std::string& path : control_directories()) {
    if (first_path->empty()) *first_path = join(path, name);
    ControlDirectory::Opened opened = ControlDirectory::open(path, /*create=*/false);
    if (!opened.directory) {
      if (!opened.missing && problem->empty()) *problem = opened.problem;
      continue;
    }
    if (opened.directory->read_file(name)) return std::move(opened.directory);
  }
  return nullptr;
}

}  // namespace

std::string control_directory() {
  const char* chosen = std::getenv("OPSIGHT_CONTROL_DIR");
  if (chosen != nullptr && chosen[0] != '\0') return chosen;
  if (auto runtime = private_runtime_directory()) return join(*runtime, "opsight");
  return "/tmp/opsight-" + std::to_string(getuid());
}

std::vector<std::string> control_directories() {
  const char* chosen = std::getenv("OPSIGHT_CONTROL_DIR");
  if (chosen != nullptr && chosen[0] != '\0') return {chosen};
  std::vector<std::string> directories;
  if (auto runtime = private_runtime_directory()) directories.push_back(join(*runtime, "opsight"));
  directories.push_back("/tmp/opsight-" + std::to_string(getuid()));
  return directories;
}

std::optional<std::string> private_directory_problem(mode_t mode, uid_t owner, uid_t user) {
  if (S_ISLNK(mode)) return "is a symbolic link";
  if (!S_ISDIR(mode)) return "is not a directory";
  if (owner != user)
    return "is owned by uid " + std::to_string(owner) + ", not by this user (uid " +
           std::to_string(user) + ")";
  if ((mode & 077) != 0)
    return "has mode " + octal_mode(mode) + " (other users may use it; it must be 0700)";
  return std::nullopt;
}

std::string state_file_name(pid_t pid) { return std::to_string(pid) + ".state"; }
std::string request_file_name(pid_t pid) { return std::to_string(pid) + ".request"; }
std::string dumped_file_name(pid_t pid) { return std::to_string(pid) + ".dumped"; }

namespace {
std::mutex g_dump_handler_mutex;
std::function<std::string()>& dump_handler() {
  static auto* handler = new std::function<std::string()>();  // never destroyed: see g_watcher
  return *handler;
}
}  // namespace

void set_control_dump_handler(std::function<std::string()> handler) {
  std::lock_guard lock(g_dump_handler_mutex);
  dump_handler() = std::move(handler);
}

// ---- ControlDirectory -------------------------------------------------------------------

ControlDirectory::Opened ControlDirectory::open(const std::string& given_path, bool create) {
  Opened opened;
  // Without its trailing slashes: "link/" would resolve the symlink "link" for lstat and
  // O_NOFOLLOW alike.
  std::string path = given_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string named = "control directory " + path;
  if (path.empty()) {
    opened.problem = "no control directory";
    return opened;
  }
  if (create) make_directories(path);
  struct stat status;
  if (lstat(path.c_str(), &status) != 0) {
    int error = errno;
    opened.missing = error == ENOENT;
    if (create || !opened.missing) opened.problem = named + ": " + error_text(error);
    return opened;
  }
  if (auto problem = private_directory_problem(status.st_mode, status.st_uid, geteuid())) {
    opened.problem = named + " " + *problem;
    return opened;
  }
  // O_NOFOLLOW and the checks again on what was opened: the path may have been swapped
  // since lstat.
  int descriptor = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (descriptor < 0) {
    opened.problem = named + ": " + error_text(errno);
    return opened;
  }
  if (fstat(descriptor, &status) != 0) {
    opened.problem = named + ": " + error_text(errno);
    close(descriptor);
    return opened;
  }
  if (auto problem = private_directory_problem(status.st_mode, status.st_uid, geteuid())) {
    opened.problem = named + " " + *problem;
    close(descriptor);
    return opened;
  }
  opened.directory.reset(new ControlDirectory(descriptor, path));
  return opened;
}

ControlDirectory::ControlDirectory(ControlDirectory&& other) noexcept
    : descriptor_(std::exchange(other.descriptor_, -1)), path_(std::move(other.path_)) {}

ControlDirectory& ControlDirectory::operator=(ControlDirectory&& other) noexcept {
  if (this != &other) {
    if (descriptor_ >= 0) close(descriptor_);
    descriptor_ = std::exchange(other.descriptor_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

ControlDirectory::~ControlDirectory() {
  if (descriptor_ >= 0) close(descriptor_);
}

std::optional<std::string> ControlDirectory::write_file(const std::string& name,
                                                        std::string_view text) const {
  const std::string temporary = name + "." + std::to_string(getpid()) + ".tmp";
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int descriptor = openat(descriptor_, temporary.c_str(), flags, 0600);
  if (descriptor < 0 && errno == EEXIST) {
    // Left by a process of this pid that died while writing, or planted: unlinking removes
    // the name (a symlink itself, never its target); a directory there stays and fails.
    unlinkat(descriptor_, temporary.c_str(), 0);
    descriptor = openat(descriptor_, temporary.c_str(), flags, 0600);
  }
  if (descriptor < 0) return join(path_, temporary) + ": " + error_text(errno);
  bool written = write_all(descriptor, text);
  int write_error = errno;
  if (close(descriptor) != 0 && written) {
    written = false;
    write_error = errno;
  }
  if (written && renameat(descriptor_, temporary.c_str(), descriptor_, name.c_str()) == 0)
    return std::nullopt;
  if (written) write_error = errno;
  unlinkat(descriptor_, temporary.c_str(), 0);
  return join(path_, name) + ": " + error_text(write_error);
}

std::optional<std::string> ControlDirectory::read_file(const std::string& name,
                                                       size_t max_bytes) const {
  // O_NONBLOCK: a FIFO planted there must not block the reader.
  int descriptor =
      openat(descriptor_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (descriptor < 0) return std::nullopt;
  struct stat status;
  std::string buffer(std::min<size_t>(max_bytes, 8192), '\0');
  ssize_t length = -1;
  if (fstat(descriptor, &status) == 0 && S_ISREG(status.st_mode)) {
    do {
      length = ::read(descriptor, buffer.data(), buffer.size());
    } while (length < 0 && errno == EINTR);
  }
  close(descriptor);
  if (length < 0) return std::nullopt;
  return std::string(trimmed(std::string_view(buffer.data(), static_cast<size_t>(length))));
}

std::optional<int64_t> ControlDirectory::modification_ns(const std::string& name) const {
  struct stat status;
  if (fstatat(descriptor_, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return static_cast<int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec;
}

void ControlDirectory::remove_file(const std::string& name) const {
  unlinkat(descriptor_, name.c_str(), 0);
}

std::vector<std::string> ControlDirectory::file_names() const {
  std::vector<std::string> names;
  int descriptor = openat(descriptor_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (descriptor < 0) return names;
  DIR* listing = fdopendir(descriptor);  // owns the descriptor from here
  if (listing == nullptr) {
    close(descriptor);
    return names;
  }
  while (dirent* entry = readdir(listing)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  closedir(listing);
  std::sort(names.begin(), names.end());
  return names;
}

// ---- ControlWatcher ---------------------------------------------------------------------

struct ControlWatcher::State {
  std::unique_ptr<ControlDirectory> directory;
  ControlApply apply;
  ControlRequestsApply apply_requests;
  pid_t owner_pid = 0;
  std::string state_name;
  std::string request_name;
  int64_t last_request_ns = 0;  // the watcher thread's only

  std::mutex publish_mutex;  // one writer of the state file at a time (they share its temporary)

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;  // under mutex
  std::thread thread;

  void run() {
    pthread_setname_np(pthread_self(), "opsight-control");
    std::unique_lock lock(mutex);
    while (!wake.wait_for(lock, std::chrono::milliseconds(kControlPollMilliseconds),
                          [this] { return stopping; })) {
      lock.unlock();
      poll();
      lock.lock();
    }
  }

  void poll() {
    std::optional<int64_t> modified = directory->modification_ns(request_name);
    if (!modified || *modified == last_request_ns) return;
    last_request_ns = *modified;
    std::optional<std::string> text = directory->read_file(request_name);
    std::optional<ControlRequest> request = text ? parse_control_request(*text) : std::nullopt;
    if (!request) return;
    if (request->kind == ControlRequest::Kind::dump) {
      std::function<std::string()> handler;
      {
        std::lock_guard lock(g_dump_handler_mutex);
        handler = dump_handler();
      }
      std::string answer = handler ? handler()
                                   : "error: process " + std::to_string(owner_pid) +
                                         " records without a flight recorder (start it with a "
                                         "ring: opsight run --ring 60s)";
      static_cast<void>(directory->write_file(dumped_file_name(owner_pid), answer));
      return;
    }
    if (request->kind == ControlRequest::Kind::requests) {
      if (!apply_requests) return;  // this process counts no requests: its state stays
      static_cast<void>(publish(apply_requests(request->count)));
      return;
    }
    apply(request->kind == ControlRequest::Kind::on);
    static_cast<void>(publish(*text));
  }

  std::optional<std::string> publish(std::string_view state) {
    std::lock_guard lock(publish_mutex);
    return directory->write_file(state_name, state);
  }
};

namespace {

// The files a process killed with SIGKILL left behind (it never reached its stop()): a pid
// reused by an untraced process would otherwise look traced to `opsight ctl`.
void remove_files_of_ended_processes(const ControlDirectory& directory) {
  for (const std::string& name : directory.file_names()) {
    size_t dot = name.find('.');
    if (dot == 0 || dot == std::string::npos) continue;
    std::string_view suffix = std::string_view(name).substr(dot);
    if (suffix != ".state" && suffix != ".request" && suffix != ".dumped") continue;
    char* end = nullptr;
    long pid = std::strtol(name.c_str(), &end, 10);
    if (end != name.c_str() + dot || pid <= 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) directory.remove_file(name);
  }
}

}  // namespace

ControlWatcher::ControlWatcher(std::unique_ptr<State> state) : state_(std::move(state)) {}

ControlWatcher::~ControlWatcher() { stop(); }

std::optional<ControlRequest> parse_control_request(std::string_view text) {
  if (text == "on") return ControlRequest{ControlRequest::Kind::on};
  if (text == "off") return ControlRequest{ControlRequest::Kind::off};
  if (text == "dump") return ControlRequest{ControlRequest::Kind::dump};
  constexpr std::string_view kRequests = "requests ";
  if (!text.starts_with(kRequests)) return std::nullopt;
  std::string_view digits = text.substr(kRequests.size());
  int64_t count = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (error != std::errc{} || end != digits.data() + digits.size() || count < 1 ||
      count > kMaxControlRequests)
    return std::nullopt;
  return ControlRequest{ControlRequest::Kind::requests, count};
}

ControlWatcher::Started ControlWatcher::start(const std::string& directory_path, ControlApply apply,
                                              bool enabled, ControlRequestsApply apply_requests) {
  Started started;
  ControlDirectory::Opened opened = ControlDirectory::open(directory_path, /*create=*/true);
  if (!opened.directory) {
    started.problem = opened.problem;
    return started;
  }
  auto state = std::make_unique<State>();
  state->directory = std::move(opened.directory);
  state->apply = std::move(apply);
  state->apply_requests = std::move(apply_requests);
  state->owner_pid = getpid();
  state->state_name = state_file_name(state->owner_pid);
  state->request_name = request_file_name(state->owner_pid);
  if (auto problem = state->directory->write_file(state->state_name, enabled ? "on" : "off")) {
    started.problem = *problem;
    return started;
  }
  state->directory->remove_file(state->request_name);  // from an earlier process of this pid
  remove_files_of_ended_processes(*state->directory);
  State* running = state.get();
  try {
    state->thread = std::thread([running] { running->run(); });
  } catch (const std::system_error& error) {  // no thread to be had
    state->directory->remove_file(state->state_name);
    started.problem = std::string("cannot start the control thread: ") + error.what();
    return started;
  }
  started.watcher.reset(new ControlWatcher(std::move(state)));
  return started;
}

std::optional<std::string> ControlWatcher::publish(std::string_view state) const {
  if (!state_) return "the watcher is stopped";
  return state_->publish(state);
}

void ControlWatcher::stop() {
  if (!state_) return;
  if (getpid() != state_->owner_pid) {
    // A forked child: the thread exists in the parent only (joining it would wait
    // forever), its mutex may have been held at the fork, and the files are the parent's.
    static_cast<void>(state_.release());
    return;
  }
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
  state_->directory->remove_file(state_->state_name);
  state_->directory->remove_file(state_->request_name);
  state_->directory->remove_file(dumped_file_name(state_->owner_pid));
  state_.reset();
}

// ---- the process's watcher ------------------------------------------------------------------

namespace {
// Never destroyed by static destruction: a thread still running at exit would make the
// std::thread's destructor end the process.
ControlWatcher* g_watcher = nullptr;
// Guards g_watcher against publish_control_state() from another thread. Never held while
// a watcher stops: its thread may be inside an apply that publishes.
std::mutex g_watcher_mutex;
}  // namespace

bool start_control_watcher(ControlApply apply, bool enabled, ControlRequestsApply apply_requests) {
  stop_control_watcher();
  ControlWatcher::Started started = ControlWatcher::start(control_directory(), std::move(apply),
                                                          enabled, std::move(apply_requests));
  if (!started.watcher) {
    std::fprintf(stderr,
                 "opsight: %s: opsight ctl cannot switch the tracing of this process (pid %d), "
                 "which runs on (set OPSIGHT_CONTROL_DIR to a private directory)\n",
                 started.problem.c_str(), static_cast<int>(getpid()));
    return false;
  }
  std::lock_guard lock(g_watcher_mutex);
  g_watcher = started.watcher.release();
  return true;
}

void stop_control_watcher() {
  ControlWatcher* watcher = nullptr;
  {
    std::lock_guard lock(g_watcher_mutex);
    watcher = std::exchange(g_watcher, nullptr);
  }
  delete watcher;  // stops it (or forgets the parent's, in a forked child)
}

void publish_control_state(std::string_view state) {
  std::lock_guard lock(g_watcher_mutex);
  if (g_watcher != nullptr) static_cast<void>(g_watcher->publish(state));
}

// ---- opsight ctl's side -----------------------------------------------------------------------

TracedProcessState traced_process_state(pid_t pid) {
  TracedProcessState result;
  std::unique_ptr<ControlDirectory> directory =
      find_process_directory(pid, &result.problem, &result.state_path);
  if (directory) {
    result.state_path = join(directory->path(), state_file_name(pid));
    result.state = directory->read_file(state_file_name(pid));
  }
  return result;
}

std::optional<std::string> request_state(pid_t pid, std::string_view state) {
  std::string problem;
  std::string state_path;
  std::unique_ptr<ControlDirectory> directory = find_process_directory(pid, &problem, &state_path);
  if (!directory) return "process " + std::to_string(pid) + " publishes no state";
  return directory->write_file(request_file_name(pid), state);
}

std::optional<std::pair<std::string, int64_t>> dumped_state(pid_t pid) {
  std::string problem;
  std::string state_path;
  std::unique_ptr<ControlDirectory> directory = find_process_directory(pid, &problem, &state_path);
  if (!directory) return std::nullopt;
  auto modified = directory->modification_ns(dumped_file_name(pid));
  if (!modified) return std::nullopt;
  auto text = directory->read_file(dumped_file_name(pid), 8192);
  return std::make_pair(text.value_or(""), *modified);
}

PublishedStates published_states() {
  PublishedStates published;
  std::set<pid_t> seen;
  for (const std::string& path : control_directories()) {
    ControlDirectory::Opened opened = ControlDirectory::open(path, /*create=*/false);
    if (!opened.directory) {
      if (!opened.missing) published.problems.push_back(opened.problem);
      continue;
    }
    for (const std::string& name : opened.directory->file_names()) {
      constexpr std::string_view kSuffix = ".state";
      if (name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) continue;
      std::string_view digits(name.data(), name.size() - kSuffix.size());
      if (digits.size() > 9 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        continue;
      pid_t pid = static_cast<pid_t>(std::stol(std::string(digits)));
      if (!seen.insert(pid).second) continue;
      published.processes.emplace_back(pid, opened.directory->read_file(name).value_or("?"));
    }
  }
  std::sort(published.processes.begin(), published.processes.end());
  return published;
}

}  // namespace opsight::session
