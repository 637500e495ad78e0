// `opsight ctl PID on|off|status|list`: switching the tracing of a running traced process
// from outside, through two small files per process in a private control directory:
//
//   <pid>.state    written by the traced process: "on" or "off", what it does now;
//   <pid>.request  written by `opsight ctl`: "on" or "off", what it should do.
//
// The directory is $OPSIGHT_CONTROL_DIR if set, else $XDG_RUNTIME_DIR/opsight when
// XDG_RUNTIME_DIR is set and private (a directory of this user's, mode 0700), else
// /tmp/opsight-<uid>. It is created with mode 0700 and used only if it is a real directory
// (not a symlink), owned by this user, with no group or other permission bits: another
// local user who made it first, or who could write in it, could otherwise switch this
// user's processes or plant symlinks that make them overwrite this user's files. Every
// file is opened relative to the directory's descriptor with O_NOFOLLOW; a file is written
// as "<name>.<pid>.tmp" (O_CREAT | O_EXCL) and renamed into place, so a symlink planted at
// either name is replaced, never followed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opsight::session {

// How often a traced process looks at its request file.
inline constexpr int kControlPollMilliseconds = 100;

// The directory this process publishes its state in (see the top of the file).
std::string control_directory();
// The directories `opsight ctl` looks in, in order: $OPSIGHT_CONTROL_DIR alone if set, else
// $XDG_RUNTIME_DIR/opsight (when private) then /tmp/opsight-<uid>, so that a process
// started where XDG_RUNTIME_DIR was set is found from a shell where it is not, and back.
std::vector<std::string> control_directories();

// Why a directory's status (from lstat or fstat) makes it unfit to hold control files, or
// nullopt if it is fit: a symlink, not a directory, not owned by `user`, or group/other
// permission bits set.
std::optional<std::string> private_directory_problem(mode_t mode, uid_t owner, uid_t user);

// An open control directory: every file operation goes through its descriptor, so the
// directory cannot be swapped for another between the check and the use. Thread-safety:
// its methods may be called from several threads at once (each is one or a few system
// calls on the descriptor, which never changes); moving it is not thread-safe.
class ControlDirectory {
 public:
  struct Opened;

  // Opens `path` (creating it, and missing parents, with mode 0700 if `create`) and checks
  // it is private. On failure `directory` is empty and `problem` says why; a missing
  // directory (when not creating) has an empty problem and `missing` set.
  static Opened open(const std::string& path, bool create);

  ControlDirectory(ControlDirectory&& other) noexcept;
  ControlDirectory& operator=(ControlDirectory&& other) noexcept;
  ControlDirectory(const ControlDirectory&) = delete;
  ControlDirectory& operator=(const ControlDirectory&) = delete;
  ~ControlDirectory();

  const std::string& path() const { return path_; }
  // Writes `text` as file `name`: a fresh temporary file, then renamed over `name`.
  // Returns an error message on failure.
  std::optional<std::string> write_file(const std::string& name, std::string_view text) const;
  // The text of regular file `name` (up to `max_bytes`, at most 8192, surrounding white
  // space removed), or nullopt if there is none (a symlink or anything but a regular file
  // counts as none).
  std::optional<std::string> read_file(const std::string& name, size_t max_bytes = 64) const;
  // The modification time of `name` in nanoseconds (not following a symlink), or nullopt.
  std::optional<int64_t> modification_ns(const std::string& name) const;
  void remove_file(const std::string& name) const;
  // The names in the directory.
  std::vector<std::string> file_names() const;

 private:
  ControlDirectory(int descriptor, std::string path)
      : descriptor_(descriptor), path_(std::move(path)) {}
  int descriptor_ = -1;
  std::string path_;
};

struct ControlDirectory::Opened {
  std::unique_ptr<ControlDirectory> directory;  // null on failure
  std::string problem;                          // why not, for a person
  bool missing = false;                         // it does not exist (and was not created)
};

std::string state_file_name(pid_t pid);
std::string request_file_name(pid_t pid);
// "<pid>.dumped": the path of the process's last dump asked for by `opsight ctl PID dump`,
// or "error: ..." (rewritten at each request, so its modification time says it answered).
std::string dumped_file_name(pid_t pid);

// Handles "dump" requests: returns the dump's path, or "error: ...". Set by a session with a
// flight recorder while it runs; without one, a "dump" request is answered "error: ...".
// Thread-safety: any thread.
void set_control_dump_handler(std::function<std::string()> handler);

// Applies a request: called on the watcher's thread with the requested state (true: on).
using ControlApply = std::function<void(bool enabled)>;
// Applies "requests N" (trace the next N requests the process serves, then switch off):
// called on the watcher's thread; returns the state to publish ("requests N"). Only a
// process that counts its requests (the Python package's HTTP server integrations) has one.
using ControlRequestsApply = std::function<std::string(int64_t count)>;

// What a request file may say: "on", "off", "requests N" (1 <= N <= kMaxControlRequests)
// or "dump" (the flight recorder writes what its ring holds).
struct ControlRequest {
  enum class Kind { on, off, requests, dump };
  Kind kind = Kind::on;
  int64_t count = 0;  // for requests
};
inline constexpr int64_t kMaxControlRequests = 1'000'000'000;
std::optional<ControlRequest> parse_control_request(std::string_view text);

// The traced process's side. Publishes "<pid>.state", then a thread stats "<pid>.request"
// every kControlPollMilliseconds; when its modification time changes and it says "on" or
// "off", the thread calls `apply` and publishes the new state; "requests N" goes to
// `apply_requests` (ignored without one), which says what to publish. Stopping removes
// both files.
// A watcher costs one fstatat(2) per poll while nobody asks anything of it.
// Thread-safety: start and stop from one thread at a time; `apply` runs on the watcher's
// own thread, never concurrently with itself.
class ControlWatcher {
 public:
  ~ControlWatcher();  // stops
  ControlWatcher(const ControlWatcher&) = delete;
  ControlWatcher& operator=(const ControlWatcher&) = delete;

  struct Started;
  // Opens (creates) `directory_path`, publishes `enabled` and starts watching.
  static Started start(const std::string& directory_path, ControlApply apply, bool enabled,
                       ControlRequestsApply apply_requests = {});
  // Rewrites "<pid>.state" (a budget of requests that ran out publishes "off"); an error
  // message on failure. Thread-safety: any thread.
  std::optional<std::string> publish(std::string_view state) const;

  // Ends the thread and removes this process's control files. Does nothing in a forked
  // child (the thread and the files are the parent's). Later calls do nothing.
  void stop();

 private:
  struct State;
  explicit ControlWatcher(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

struct ControlWatcher::Started {
  std::unique_ptr<ControlWatcher> watcher;  // null on failure
  std::string problem;
};

// The process's one watcher, in control_directory(). Starting replaces a running one (or,
// in a forked child, forgets the parent's). A failure is one line on stderr ("opsight:
// ... cannot be switched by opsight ctl") and the program runs on; returns whether it
// watches. Thread-safety: call start and stop from one thread at a time.
bool start_control_watcher(ControlApply apply, bool enabled,
                           ControlRequestsApply apply_requests = {});
void stop_control_watcher();
// Publishes `state` through the process's watcher (none running: does nothing). Thread-safety:
// any thread, also while another stops the watcher.
void publish_control_state(std::string_view state);

// `opsight ctl`'s side: where process `pid` publishes its state and what it says.
struct TracedProcessState {
  std::string state_path;            // found, or where it would be in the first directory
  std::optional<std::string> state;  // nullopt: the process is not traced (or not by us)
  std::string problem;               // a directory refused on the way, for the message
};
TracedProcessState traced_process_state(pid_t pid);
// Asks process `pid` (found as traced_process_state finds it) to switch; an error if it
// could not be asked.
std::optional<std::string> request_state(pid_t pid, std::string_view state);
// The text of process `pid`'s "<pid>.dumped" and its modification time, if it has one.
std::optional<std::pair<std::string, int64_t>> dumped_state(pid_t pid);
// Every process with a state file (live or not) in the control directories, each pid
// once; and the directories refused on the way, for a warning.
struct PublishedStates {
  std::vector<std::pair<pid_t, std::string>> processes;  // (pid, state), by pid
  std::vector<std::string> problems;
};
PublishedStates published_states();

}  // namespace opsight::session
