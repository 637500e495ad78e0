// The control files of `opsight ctl` (control.hpp): the private directory's rules against
// another local user who got there first, files that never follow a planted symlink, the
// watcher thread's switches, and a session switched off and on through it.
#include "session/control.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/io.hpp"
#include "opsight/opsight.hpp"

namespace {

namespace fs = std::filesystem;
using opsight::session::ControlDirectory;
using opsight::session::ControlWatcher;

// A fresh private directory, removed with everything in it at the end of the test.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::string pattern = (fs::temp_directory_path() / "opsight-control-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Sets an environment variable for the test's duration (unsets it for nullptr).
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value == nullptr)
      unsetenv(name);
    else
      setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string read_text(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

mode_t mode_of(const fs::path& path) {
  struct stat status;
  EXPECT_EQ(lstat(path.c_str(), &status), 0);
  return status.st_mode & 07777;
}

bool wait_until(const std::function<bool()>& condition) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

TEST(ControlDirectory, IsCreatedPrivateWithItsMissingParents) {
  ScratchDirectory scratch;
  fs::path path = scratch.path() / "parent" / "control";
  mode_t old_mask = umask(0);  // a careless umask must not widen it
  auto opened = ControlDirectory::open(path.string(), /*create=*/true);
  umask(old_mask);
  ASSERT_TRUE(opened.directory) << opened.problem;
  EXPECT_EQ(mode_of(path), 0700u);
  EXPECT_EQ(mode_of(scratch.path() / "parent"), 0700u);
}

TEST(ControlDirectory, AMissingOneIsNotCreatedWhenOnlyLooking) {
  ScratchDirectory scratch;
  auto opened = ControlDirectory::open((scratch.path() / "absent").string(), /*create=*/false);
  EXPECT_FALSE(opened.directory);
  EXPECT_TRUE(opened.missing);
  EXPECT_EQ(opened.problem, "");
  EXPECT_FALSE(fs::exists(scratch.path() / "absent"));
}

TEST(ControlDirectory, OneThatOthersMayWriteInIsRefused) {
  ScratchDirectory scratch;
  fs::path path = scratch.path() / "control";
  ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
  ASSERT_EQ(chmod(path.c_str(), 0777), 0);  // pre-created by someone else, open to all
  auto opened = ControlDirectory::open(path.string(), /*create=*/true);
  EXPECT_FALSE(opened.directory);
  EXPECT_NE(opened.problem.find(path.string() + " has mode 0777"), std::string::npos)
      << opened.problem;
  ASSERT_EQ(chmod(path.c_str(), 0750), 0);  // group bits alone are enough to refuse
  EXPECT_FALSE(ControlDirectory::open(path.string(), true).directory);
  ASSERT_EQ(chmod(path.c_str(), 0700), 0);
  EXPECT_TRUE(ControlDirectory::open(path.string(), true).directory);
}

TEST(ControlDirectory, ASymlinkIsRefusedEvenToAPrivateDirectory) {
  ScratchDirectory scratch;
  fs::path target = scratch.path() / "real";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  fs::path link = scratch.path() / "control";
  fs::create_directory_symlink(target, link);
  auto opened = ControlDirectory::open(link.string(), /*create=*/true);
  EXPECT_FALSE(opened.directory);
  EXPECT_NE(opened.problem.find("is a symbolic link"), std::string::npos) << opened.problem;
  EXPECT_FALSE(ControlDirectory::open(link.string() + "//", true).directory);  // no way round
  EXPECT_TRUE(fs::is_empty(target));
}

TEST(ControlDirectory, OneOwnedBySomeoneElseIsRefused) {
  EXPECT_EQ(opsight::session::private_directory_problem(S_IFDIR | 0700, 1234, 1000),
            "is owned by uid 1234, not by this user (uid 1000)");
  EXPECT_EQ(opsight::session::private_directory_problem(S_IFDIR | 0700, 1000, 1000), std::nullopt);
  EXPECT_EQ(opsight::session::private_directory_problem(S_IFREG | 0600, 1000, 1000),
            "is not a directory");
  // A real directory owned by someone else, whoever runs the test: as root, one handed to
  // uid 4242; as any other user, the file system's root (owned by root). No skip either way.
  ScratchDirectory scratch;
  fs::path path = scratch.path() / "control";
  uid_t owner = 4242;
  if (geteuid() == 0) {
    ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
    ASSERT_EQ(chown(path.c_str(), owner, owner), 0);
  } else {
    path = "/";
    struct stat status;
    ASSERT_EQ(lstat(path.c_str(), &status), 0);
    ASSERT_NE(status.st_uid, geteuid()) << "/ is owned by this (non-root) user";
    owner = status.st_uid;
  }
  auto opened = ControlDirectory::open(path.string(), /*create=*/true);
  EXPECT_FALSE(opened.directory);
  EXPECT_NE(opened.problem.find("is owned by uid " + std::to_string(owner) + ", not by this user"),
            std::string::npos)
      << opened.problem;
}

TEST(ControlDirectory, WritingReplacesPlantedSymlinksAndNeverFollowsThem) {
  ScratchDirectory scratch;
  fs::path victim = scratch.path() / "victim";
  write_text(victim, "precious");
  auto opened = ControlDirectory::open((scratch.path() / "control").string(), true);
  ASSERT_TRUE(opened.directory) << opened.problem;
  const ControlDirectory& directory = *opened.directory;
  fs::path state = scratch.path() / "control" / "7.state";
  fs::path temporary =
      scratch.path() / "control" / ("7.state." + std::to_string(getpid()) + ".tmp");
  fs::create_symlink(victim, temporary);
  fs::create_symlink(victim, state);
  EXPECT_EQ(directory.read_file("7.state"), std::nullopt);  // not read through the link

  EXPECT_EQ(directory.write_file("7.state", "on"), std::nullopt);
  EXPECT_EQ(read_text(victim), "precious");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(state)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(temporary)));
  EXPECT_EQ(read_text(state), "on");
  EXPECT_EQ(directory.read_file("7.state"), "on");
  struct stat status;
  ASSERT_EQ(lstat(state.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
}

TEST(ControlDirectory, ReadsOnlyRegularFilesAndNeverBlocksOnAPipe) {
  ScratchDirectory scratch;
  auto opened = ControlDirectory::open((scratch.path() / "control").string(), true);
  ASSERT_TRUE(opened.directory);
  ASSERT_EQ(mkfifo((scratch.path() / "control" / "1.request").c_str(), 0600), 0);
  EXPECT_EQ(opened.directory->read_file("1.request"), std::nullopt);
  write_text(scratch.path() / "control" / "2.request", " off\n");
  EXPECT_EQ(opened.directory->read_file("2.request"), "off");
}

TEST(ControlDirectory, IsTheOverrideElseAPrivateRuntimeDirectoryElseTmp) {
  ScratchDirectory scratch;
  const std::string tmp_default = "/tmp/opsight-" + std::to_string(getuid());
  ScopedEnvironment no_override("OPSIGHT_CONTROL_DIR", nullptr);
  {
    ScopedEnvironment runtime("XDG_RUNTIME_DIR", scratch.path().c_str());
    EXPECT_EQ(opsight::session::control_directory(), (scratch.path() / "opsight").string());
    EXPECT_EQ(opsight::session::control_directories(),
              (std::vector<std::string>{(scratch.path() / "opsight").string(), tmp_default}));
    ASSERT_EQ(chmod(scratch.path().c_str(), 0755), 0);  // not private: not used
    EXPECT_EQ(opsight::session::control_directory(), tmp_default);
    EXPECT_EQ(opsight::session::control_directories(), std::vector<std::string>{tmp_default});
    ASSERT_EQ(chmod(scratch.path().c_str(), 0700), 0);
  }
  {
    ScopedEnvironment runtime("XDG_RUNTIME_DIR", "relative/path");
    EXPECT_EQ(opsight::session::control_directory(), tmp_default);
  }
  ScopedEnvironment chosen("OPSIGHT_CONTROL_DIR", "/somewhere/chosen");
  ScopedEnvironment runtime("XDG_RUNTIME_DIR", scratch.path().c_str());
  EXPECT_EQ(opsight::session::control_directory(), "/somewhere/chosen");
  EXPECT_EQ(opsight::session::control_directories(), std::vector<std::string>{"/somewhere/chosen"});
}

TEST(ControlWatcher, AppliesRequestsPublishesItsStateAndCleansUp) {
  ScratchDirectory scratch;
  fs::path control = scratch.path() / "control";
  ScopedEnvironment chosen("OPSIGHT_CONTROL_DIR", control.c_str());
  std::atomic<int> switched_on{0};
  std::atomic<int> switched_off{0};
  ASSERT_TRUE(opsight::session::start_control_watcher(
      [&](bool enabled) { ++(enabled ? switched_on : switched_off); }, /*enabled=*/true));
  const pid_t pid = getpid();
  fs::path state = control / (std::to_string(pid) + ".state");
  EXPECT_EQ(read_text(state), "on");
  EXPECT_EQ(opsight::session::traced_process_state(pid).state, "on");
  auto published = opsight::session::published_states();
  ASSERT_EQ(published.processes.size(), 1u);
  EXPECT_EQ(published.processes[0], std::make_pair(pid, std::string("on")));

  EXPECT_EQ(opsight::session::request_state(pid, "off"), std::nullopt);
  EXPECT_TRUE(wait_until([&] { return read_text(state) == "off"; }));
  EXPECT_EQ(switched_off.load(), 1);
  EXPECT_EQ(opsight::session::request_state(pid, "nonsense"), std::nullopt);  // ignored
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(read_text(state), "off");
  EXPECT_EQ(opsight::session::request_state(pid, "on"), std::nullopt);
  EXPECT_TRUE(wait_until([&] { return read_text(state) == "on"; }));
  EXPECT_EQ(switched_on.load(), 1);
  EXPECT_EQ(switched_off.load(), 1);

  opsight::session::stop_control_watcher();
  EXPECT_FALSE(fs::exists(state));
  EXPECT_FALSE(fs::exists(control / (std::to_string(pid) + ".request")));
  EXPECT_EQ(opsight::session::traced_process_state(pid).state, std::nullopt);
  EXPECT_EQ(opsight::session::request_state(pid, "off"),
            "process " + std::to_string(pid) + " publishes no state");
}

TEST(ControlRequest, ParsesOnOffAndABudgetOfRequests) {
  using opsight::session::ControlRequest;
  using opsight::session::parse_control_request;
  EXPECT_EQ(parse_control_request("on")->kind, ControlRequest::Kind::on);
  EXPECT_EQ(parse_control_request("off")->kind, ControlRequest::Kind::off);
  auto budget = parse_control_request("requests 25");
  ASSERT_TRUE(budget);
  EXPECT_EQ(budget->kind, ControlRequest::Kind::requests);
  EXPECT_EQ(budget->count, 25);
  EXPECT_EQ(parse_control_request("requests 1000000000")->count, 1'000'000'000);
  for (const char* wrong :
       {"", "ON", "requests", "requests ", "requests 0", "requests -3", "requests 12x",
        "requests 1000000001", "requests 99999999999999999999", "requests  4", "window 10"})
    EXPECT_FALSE(parse_control_request(wrong)) << wrong;
}

TEST(ControlWatcher, HandsABudgetOfRequestsToItsHandlerAndPublishesWhatItSays) {
  ScratchDirectory scratch;
  fs::path control = scratch.path() / "control";
  ScopedEnvironment chosen("OPSIGHT_CONTROL_DIR", control.c_str());
  std::atomic<int64_t> budget{0};
  std::atomic<int> switched{0};
  ASSERT_TRUE(opsight::session::start_control_watcher([&](bool) { ++switched; }, /*enabled=*/false,
                                                      [&](int64_t count) {
                                                        budget = count;
                                                        return "requests " + std::to_string(count);
                                                      }));
  const pid_t pid = getpid();
  fs::path state = control / (std::to_string(pid) + ".state");
  EXPECT_EQ(read_text(state), "off");
  EXPECT_EQ(opsight::session::request_state(pid, "requests 7"), std::nullopt);
  EXPECT_TRUE(wait_until([&] { return read_text(state) == "requests 7"; }));
  EXPECT_EQ(budget.load(), 7);
  EXPECT_EQ(switched.load(), 0);
  opsight::session::publish_control_state("off");  // the budget ran out
  EXPECT_EQ(read_text(state), "off");
  opsight::session::stop_control_watcher();
  opsight::session::publish_control_state("on");  // no watcher: nothing written
  EXPECT_FALSE(fs::exists(state));
}

TEST(ControlWatcher, WithoutARequestHandlerABudgetLeavesTheStateAlone) {
  ScratchDirectory scratch;
  fs::path control = scratch.path() / "control";
  ScopedEnvironment chosen("OPSIGHT_CONTROL_DIR", control.c_str());
  std::atomic<int> switched{0};
  ASSERT_TRUE(opsight::session::start_control_watcher([&](bool) { ++switched; }, true));
  fs::path state = control / (std::to_string(getpid()) + ".state");
  EXPECT_EQ(opsight::session::request_state(getpid(), "requests 3"), std::nullopt);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(read_text(state), "on");
  EXPECT_EQ(switched.load(), 0);
  opsight::session::stop_control_watcher();
}

TEST(ControlWatcher, AnUnsafeDirectoryIsOneWarningAndNoWatcher) {
  ScratchDirectory scratch;
  fs::path control = scratch.path() / "control";
  ASSERT_EQ(mkdir(control.c_str(), 0700), 0);
  ASSERT_EQ(chmod(control.c_str(), 0777), 0);
  ScopedEnvironment chosen("OPSIGHT_CONTROL_DIR", control.c_str());
  std::atomic<int> applied{0};
  testing::internal::CaptureStderr();
  EXPECT_FALSE(opsight::session::start_control_watcher([&](bool) { ++applied; }, true));
  std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_EQ(warning.find("opsight: control directory " + control.string() + " has mode 0777"), 0u)
      << warning;
  EXPECT_NE(warning.find("opsight ctl cannot switch"), std::string::npos) << warning;
  EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1);
  EXPECT_TRUE(fs::is_empty(control));  // nothing published there
  write_text(control / (std::to_string(getpid()) + ".request"), "off");
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(applied.load(), 0);
  auto published = opsight::session::published_states();
  EXPECT_TRUE(published.processes.empty());
  ASSERT_EQ(published.problems.size(), 1u);
  EXPECT_NE(published.problems[0].find("has mode 0777"), std::string::npos);
  EXPECT_NE(opsight::session::traced_process_state(getpid()).problem.find("has mode 0777"),
            std::string::npos);
  opsight::session::stop_control_watcher();  // nothing to stop: does nothing
}

TEST(ControlWatcher, AForkedChildLeavesItsParentsWatcherAndFilesAlone) {
  ScratchDirectory scratch;
  fs::path control = scratch.path() / "control";
  ScopedEnvironment chosen("OPSIGHT_CONTROL_DIR", control.c_str());
  std::atomic<int> applied{0};
  ASSERT_TRUE(opsight::session::start_control_watcher([&](bool) { ++applied; }, true));
  fs::path state = control / (std::to_string(getpid()) + ".state");
  pid_t child = fork();
  if (child == 0) {
    opsight::session::stop_control_watcher();  // the parent's: forgotten, not joined
    _exit(fs::exists(state) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(read_text(state), "on");
  EXPECT_EQ(opsight::session::request_state(getpid(), "off"), std::nullopt);
  EXPECT_TRUE(wait_until([&] { return read_text(state) == "off"; }));
  EXPECT_EQ(applied.load(), 1);
  opsight::session::stop_control_watcher();
}

// What OPSIGHT_OUTPUT activation does: the watcher pauses and resumes the session, and the
// spans made while switched off are not in the recording.
TEST(ControlWatcher, SwitchesASessionOffAndOn) {
  ScratchDirectory scratch;
  ScopedEnvironment chosen("OPSIGHT_CONTROL_DIR", (scratch.path() / "control").c_str());
  opsight::Session session(std::string{});
  ASSERT_TRUE(session.ok()) << session.error();
  ASSERT_TRUE(opsight::session::start_control_watcher(
      [&](bool enabled) { enabled ? session.resume() : session.pause(); }, true));
  const pid_t pid = getpid();
  auto state_is = [&](const char* expected) {
    return wait_until(
        [&] { return opsight::session::traced_process_state(pid).state == expected; });
  };
  auto record = [](int count) {
    for (int i = 0; i < count; ++i) {
      OPSIGHT_SPAN("step");
    }
  };
  record(3);
  ASSERT_EQ(opsight::session::request_state(pid, "off"), std::nullopt);
  ASSERT_TRUE(state_is("off"));
  EXPECT_FALSE(opsight::recording());
  record(5);
  ASSERT_EQ(opsight::session::request_state(pid, "on"), std::nullopt);
  ASSERT_TRUE(state_is("on"));
  EXPECT_TRUE(opsight::recording());
  record(4);
  opsight::session::stop_control_watcher();
  ASSERT_TRUE(session.stop()) << session.error();
  auto result = opsight::io::read_native(session.take_native_bytes());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.trace.slices.size(), 7u);  // 3 + 4: none of the 5 made while off
}

}  // namespace

TEST(ControlWatcher, RemovesTheFilesOfProcessesThatEndedWithoutCleaningUp) {
  ScratchDirectory scratch;
  fs::path control = scratch.path() / "control";
  ScopedEnvironment chosen("OPSIGHT_CONTROL_DIR", control.c_str());
  fs::create_directories(control);
  fs::permissions(control, fs::perms::owner_all, fs::perm_options::replace);
  // A child that exits at once: its pid is known to be gone once it is reaped.
  pid_t ended = fork();
  ASSERT_GE(ended, 0);
  if (ended == 0) _exit(0);
  ASSERT_EQ(waitpid(ended, nullptr, 0), ended);
  write_text(control / (std::to_string(ended) + ".state"), "on");
  write_text(control / (std::to_string(ended) + ".request"), "off");
  const pid_t parent = getppid();  // alive: its files stay
  write_text(control / (std::to_string(parent) + ".state"), "on");
  write_text(control / "notes.txt", "not a control file");
  ASSERT_TRUE(opsight::session::start_control_watcher([](bool) {}, /*enabled=*/true));
  EXPECT_FALSE(fs::exists(control / (std::to_string(ended) + ".state")));
  EXPECT_FALSE(fs::exists(control / (std::to_string(ended) + ".request")));
  EXPECT_TRUE(fs::exists(control / (std::to_string(parent) + ".state")));
  EXPECT_TRUE(fs::exists(control / "notes.txt"));
  opsight::session::stop_control_watcher();
}
